"""Uptrio web package."""
