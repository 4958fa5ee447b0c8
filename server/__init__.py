"""Serving the graphs: authentication, deployment settings, production server helpers."""
