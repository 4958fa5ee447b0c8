"""The memory graph's nodes (decision M1): which chats become memories, and when they count as processed."""
