"""Qt tests run offscreen; the platform must be chosen before Qt is imported."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
