"""Model providers: one adapter per kind of API (Anthropic's Messages API, any OpenAI-style
Chat Completions endpoint). The core builds Anthropic-shaped requests; an adapter sends one
to its provider, translating at this edge, and hands back an Anthropic-shaped reply.
"""
