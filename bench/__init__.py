"""Uptrio bench package."""
