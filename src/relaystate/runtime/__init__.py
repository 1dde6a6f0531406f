"""The front door and its one write path."""
