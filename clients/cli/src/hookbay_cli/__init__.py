"""hookbay's owner command line: a client of the dashboard API over HTTPS, nothing else."""
