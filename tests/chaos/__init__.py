"""The chaos suite (issue 19): the whole stack under load through faults, fuzzing and a soak."""
