"""The graph LangGraph Studio and ``langgraph dev`` serve (see ``langgraph.json``).

Compiled without a checkpointer, as the server requires; it persists runs itself. Models and
the demo index are created on the first run, not at import, so the server starts quickly.
Studio shows the per-run settings (the graph's context schema,
:class:`~dynakrag.configuration.RunSettings`) as a form.
"""

from dynakrag.graph.builder import build_graph

graph = build_graph()
