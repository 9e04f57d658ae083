"""hookbay dashboard API and owner commands."""
