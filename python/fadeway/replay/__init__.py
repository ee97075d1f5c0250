"""Replaying recorded conversations through decorate and report, each message at its own time
(ARCHITECTURE: "Time in replay"): replay lines (`lines`), inputs told apart by content
(`sources`, `locomo`), and the resumable runner (`runner`)."""
