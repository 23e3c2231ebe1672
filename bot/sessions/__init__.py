"""Pure session policy: keys, access, history limits, the per-session queue and reply throttle."""
