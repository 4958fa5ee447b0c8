"""A TCP door in front of the test database that can be shut and opened again: an outage without a restart.

Restarting the shared PostgreSQL would cut every other client of the session; shutting this door cuts only
the connections that came through it, and refuses new ones until it opens again, on the same port.
"""

from __future__ import annotations

import asyncio

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.helpers import free_port


class Door:
    """Forwards 127.0.0.1:``port`` to the database of ``url`` while open."""

    def __init__(self, url: str) -> None:
        self.target = conninfo_to_dict(url)
        self.port = free_port()
        self.url = make_conninfo(url, host="127.0.0.1", port=str(self.port))
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.StreamWriter] = set()

    async def _connect_target(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = str(self.target.get("host") or "localhost")
        port = int(self.target.get("port") or 5432)
        if host.startswith("/"):  # a socket folder, as the embedded server gives
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await self._connect_target()
        self.pipes |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def shut(self) -> None:
        """Refuse new connections and cut every open one, as a database going away does."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for pipe in list(self.pipes):
            pipe.close()
        self.pipes.clear()
        await asyncio.sleep(0.1)
