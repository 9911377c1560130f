"""A Flower :class:`~flwr.serverapp.Grid` that delivers each message to a ClientApp in this process.

Flower's strategies (``FedAvg``, its DP wrappers) drive rounds through a Grid:
``send_and_receive`` pushes one message per node and pulls the replies. In a
deployment the Grid talks to a SuperLink over gRPC and each SuperNode runs the
ClientApp; Flower's simulation engine runs ClientApps in Ray actors. This Grid
calls the same :class:`~flwr.clientapp.ClientApp` synchronously, node after
node, with one persistent :class:`~flwr.app.Context` per node, so the strategy,
the messages and the ClientApp are Flower's own and only the transport is
local (tests, laptops; no Ray, no ports).

:class:`PartitionOrderGrid` wraps another engine's Grid so that the server
sees the replies in this Grid's order (the same FedAvg sum, bit for bit).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from uuid import uuid4

from flwr.app import Context, Message, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

#: ``node_config`` keys, as Flower's simulation engine sets them.
PARTITION_ID, NUM_PARTITIONS = "partition-id", "num-partitions"
#: ``node_config`` key of a holder's own statements file (the ``files`` partition; never sent to the server)
DATA_FILE = "data-file"


class InProcessGrid(Grid):
    """Nodes ``1..num_nodes``; node ``k + 1`` runs ``client_app`` with ``partition-id = k``.

    Args:
        client_app: The ClientApp every node runs.
        num_nodes: How many nodes (data holders).
        run_id: Id of the run the messages belong to.
        node_configs: Extra ``node_config`` entries of each node (e.g. its ``data-file``).
    """

    def __init__(self, client_app, num_nodes: int, *, run_id: int = 1, node_configs=None) -> None:
        self._app = client_app
        self._run = Run.create_empty(run_id)
        extra = [{}] * num_nodes if node_configs is None else list(node_configs)
        self._contexts = {
            k + 1: Context(
                run_id=run_id,
                node_id=k + 1,
                node_config={PARTITION_ID: k, NUM_PARTITIONS: num_nodes, **extra[k]},
                state=RecordDict(),
                run_config={},
            )
            for k in range(num_nodes)
        }
        self._replies: dict[str, Message] = {}
        TaskIdentity.run_id = run_id  # what Flower's runtimes set in the server and client processes
        TaskIdentity.node_id = SUPERLINK_NODE_ID
        TaskIdentity.task_id = 1  # as Flower's run_simulation does for its one in-process task

    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self._contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            if message.metadata.dst_node_id not in self._contexts:
                raise ValueError(f"no node {message.metadata.dst_node_id}")
            message.metadata.__dict__["_message_id"] = str(uuid4())  # as Flower's in-memory grid does
            message.metadata.__dict__["_run_id"] = self._run.run_id
            TaskIdentity.node_id = message.metadata.dst_node_id  # the client's side of the exchange
            try:
                reply = self._app(message, self._contexts[message.metadata.dst_node_id])
            finally:
                TaskIdentity.node_id = SUPERLINK_NODE_ID
            self._replies[message.metadata.message_id] = reply
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))


class PartitionOrderGrid(Grid):
    """Another engine's Grid, whose replies come in the order :class:`InProcessGrid` gives them.

    Flower's strategies sample nodes with ``random.sample(grid.get_node_ids(), n)``
    on the global ``random``, which the runner seeds with the run's seed. That
    picks positions, not values, and in :class:`InProcessGrid` position i is
    holder i and the replies come in the order sent: round r's replies come
    from holders ``Random(seed)``'s r-th ``sample(range(K), n)``. On another
    engine other threads draw from the global ``random`` too (Flower's
    simulation engine and Ray do), so this grid draws that sample from its own
    ``Random(seed)``, one per :meth:`send_and_receive`, and puts the replies in
    its order, the holder told by the reply's textkg report (its
    ``partition-id``). FedAvg then adds the holders as in process. Replies
    without a report, or a second one from a holder, follow in the order they
    came, for the server to refuse.

    Args:
        grid: The Grid the engine gives the ServerApp (Flower's simulation engine: replies in the order
            its Ray actors finish; node ids random).
        seed: The seed the in-process runner gives ``random`` (``train.seed``).
    """

    def __init__(self, grid: Grid, *, seed: int) -> None:
        self._grid = grid
        self._random = random.Random(seed)
        self._num_nodes = 0

    def skip(self, rounds: int, num_nodes: int) -> None:
        """Draw the samples of ``rounds`` rounds already taken, every node in each (a resumed run)."""
        for _ in range(rounds):
            self._random.sample(range(num_nodes), num_nodes)

    def set_run(self, run: Run) -> None:
        self._grid.set_run(run)

    @property
    def run(self) -> Run:
        return self._grid.run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        nodes = list(self._grid.get_node_ids())
        self._num_nodes = len(nodes)
        return nodes

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        wanted = self._random.sample(range(self._num_nodes), len(messages))  # what the strategy drew in process
        by_holder: dict[int, Message] = {}
        rest = []
        for reply in self._grid.send_and_receive(messages, timeout=timeout):
            k = reply_partition(reply)
            if k is None or k in by_holder:
                rest.append(reply)
            else:
                by_holder[k] = reply
        ordered = [by_holder.pop(k) for k in wanted if k in by_holder]
        return ordered + list(by_holder.values()) + rest


#: Key of a holder's report in the replies of textkg's deployment ClientApp (``textkg.federated.app``).
REPORT_KEY = "textkg-report"


def reply_partition(reply: Message) -> int | None:
    """The ``partition-id`` in a reply's textkg report, or ``None`` (an error, or no report)."""
    if reply.has_error() or REPORT_KEY not in reply.content:
        return None
    try:
        return int(json.loads(str(reply.content[REPORT_KEY]["json"]))["partition"])
    except (KeyError, TypeError, ValueError):
        return None
