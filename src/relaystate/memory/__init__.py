"""Agent memory: working, long-term, graph, summaries, embeddings, context"""
