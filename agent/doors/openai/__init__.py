"""The OpenAI-compatible door: any OpenAI client (the `openai` SDK, litellm, Open WebUI,
curl) uses the agent as a model at `/v1/`, authenticated with the API's tokens.

`agentsite` runs a turn of the agent, tools and all, on the server, and answers with the
turn's final text; its steps stream as `reasoning_content`. `agentsite-plain` is one direct
generation of the same model, with no tools. The request's `messages` are the conversation
the model sees; the turn is stored in the session `openai:<user or X-Session-Key>`, or in a
session of its own (`openai:<completion id>`) when the client names none.
"""
