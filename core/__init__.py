"""The small shared core at the bottom of the import graph: pieces every app uses
and that import nothing from the apps (only the standard library)."""
