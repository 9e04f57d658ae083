"""The chaos suite: the whole stack under load through faults, fuzzing and a soak."""
