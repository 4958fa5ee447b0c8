"""State and settings of the ``ingest`` graph: paths in; what was added, kept, replaced or failed out."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

from typing_extensions import TypedDict

from ...graphs.context import LOCAL_USER, SLUG, ContextError, document_scope
from ...graphs.state import Decision
from ...skills.documents import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE


def _meta(description: str) -> dict[str, str]:
    return {"description": description}


@dataclass(kw_only=True)
class IngestContext:
    """Where documents go and how they are cut: the per-run context of the ``ingest`` graph."""

    workspace: str = field(
        default="default", metadata=_meta("Workspace slug the documents are added to and searched in.")
    )
    user_id: str = field(
        default=LOCAL_USER,
        metadata=_meta("Whose workspace it is; with API keys on, always the caller (the server sets it)."),
    )
    chunk_size: int = field(
        default=DEFAULT_CHUNK_SIZE, metadata=_meta("Characters per chunk (RecursiveCharacterTextSplitter).")
    )
    chunk_overlap: int = field(
        default=DEFAULT_CHUNK_OVERLAP, metadata=_meta("Characters shared by neighbouring chunks.")
    )
    batch_size: int = field(
        default=DEFAULT_BATCH_SIZE, metadata=_meta("Chunks per request to the embedding model.")
    )

    def __post_init__(self) -> None:
        if not isinstance(self.workspace, str) or not SLUG.fullmatch(self.workspace):
            raise ContextError(f"context field 'workspace' must be a slug, got {self.workspace!r}")
        if not isinstance(self.user_id, str) or not self.user_id.strip() or len(self.user_id) > 200:
            raise ContextError("context field 'user_id' must be a non-empty string up to 200 characters")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ValueError(f"chunk_overlap must be within 0..chunk_size-1, got {self.chunk_overlap}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")

    @property
    def documents(self) -> str:
        """The key of the user's workspace in the documents tables (``document_scope``)."""
        return document_scope(self.user_id, self.workspace)


class IngestInput(TypedDict):
    """Files or folders to add to the workspace (folders are searched recursively)."""

    paths: list[str]


class IngestOutput(TypedDict, total=False):
    """What the run did, one entry per file; ``failed`` entries carry the reason."""

    added: Annotated[list[dict[str, Any]], operator.add]
    unchanged: Annotated[list[dict[str, Any]], operator.add]
    replaced: Annotated[list[dict[str, Any]], operator.add]
    failed: Annotated[list[dict[str, Any]], operator.add]
    decisions: Annotated[list[Decision], operator.add]


class IngestState(IngestInput, IngestOutput, total=False):
    """The working state of one ingest run."""

    files: list[str]


class FileTask(TypedDict):
    """The input of one ``index_file`` task, sent by ``route_files``."""

    path: str
