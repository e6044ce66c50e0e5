"""Model back-ends, inference engine and attributions (Qt-free)."""
