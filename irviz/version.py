"""The version irviz reports (the About box): one definition, importable without the rest."""

__version__ = "0.1.0"
