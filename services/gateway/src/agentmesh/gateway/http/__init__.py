"""The gateway's HTTP face: health, REST/JSON and the OpenAI-compatible API (FastAPI)."""
