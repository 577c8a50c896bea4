"""Guard: leased locks with fencing, rolling rate limits, passwords, leaked-credential audit."""
