"""The writing assistant: suggested edits, each checked against the round's target before it is shown."""
