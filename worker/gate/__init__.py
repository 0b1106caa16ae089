"""One gate run on GitHub: check runs, trust, supersede, the sticky comment."""
