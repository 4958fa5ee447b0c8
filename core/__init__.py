"""The floor under the graph: the turn's shared types, which import nothing above them.

State, settings (``Context``), the model request's plan, the conversation's reading, the approval contract,
the prompts and the deployment's model settings. Every other folder may import these; these import only
libraries and each other (the ``import-linter`` layers contract in ``make check`` holds it).
"""
