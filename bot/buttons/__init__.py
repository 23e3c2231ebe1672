"""Choices offered with buttons: the pure rules, offering one, and the tools that do."""
