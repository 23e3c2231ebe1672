"""Spending caps in money and what model calls cost, by kind of work, person and chat."""
