"""xdn — an encrypted XML publish/subscribe dissemination network (shared core)."""

__version__ = "0.1.0"
