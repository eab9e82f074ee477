"""Verification: which checks a candidate gets (cases, branches, stress) and how they are judged."""
