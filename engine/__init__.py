"""Uptrio engine package."""
