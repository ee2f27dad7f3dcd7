"""The repositories gitreg publishes from: registering them and syncing their tags."""
