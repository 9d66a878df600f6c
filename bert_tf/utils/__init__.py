"""Small shared pieces: file patterns, atomic outputs, progress lines."""
