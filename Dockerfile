# The node agent image (multi-stage, Debian bookworm) is built here once the agent exists.
