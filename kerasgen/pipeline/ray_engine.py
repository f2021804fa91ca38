"""`kg.RayEngine`: where a generator's batches are made when one machine is not enough: on
the actors of a Ray cluster (`engine=kg.RayEngine(...)`, a keyword of every generator).

This module holds what the engine is (its arguments, checked and frozen) and how it
reaches Ray (`connect`: the one place that imports Ray and calls `ray.init`); the actors
and the batches' way back are pipeline/ray_pool.py's. Ray is optional:
pip install "kerasgen3[ray]".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kerasgen import _checks

PIP_RAY = 'pip install "kerasgen3[ray]"'
# engine -> the list of its actors now (pipeline/ray_pool.py's RayCrew keeps it current)
RUNNING: dict[RayEngine, list[Any]] = {}
DEFAULT_ACTOR_OPTIONS: Mapping[str, Any] = {"num_cpus": 1}


def ray_module() -> Any:
    """Ray, imported; an ImportError with the pip command where it is not installed."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(f"engine=kg.RayEngine(...) needs Ray: {PIP_RAY}") from error
    return ray


class RayEngine:
    """Batches made by Ray actors, on the nodes of a Ray cluster, streamed back to the
    training process in order: pass `engine=kg.RayEngine(...)` to any generator.

    Batch b of epoch e is a pure function of the generator's recipe (its batch maker and
    order), so every actor makes the same bytes the training process would make: each
    actor receives that recipe once (pickled, through Ray's object store), and each
    batch asked of it is five numbers (epoch, resume offset, index, seed, batch order).
    The generator's work-ahead window (`max_queue_size` batches, at most 256 MiB) bounds
    the batches in flight. An actor or a node lost mid-epoch has its batches made again
    (by a new actor in its place where the cluster has room, else by the others),
    identical, and the epoch goes on. The generators of one engine share its actors.

    Args:
        address: the cluster, as `ray.init(address=...)` takes it ("auto", or
            "ray://host:10001" through Ray Client). None: the Ray session this process
            already holds (`ray.init(...)` called before), else `ray.init()` (which
            reads RAY_ADDRESS, or starts Ray on this machine).
        actors: how many actors make batches. None: the generator's `workers` when it
            is over 1, else as many as the cluster's CPUs hold (its CPUs divided by the
            actors' `num_cpus`), at least 1.
        actor_options: Ray's options of each actor (`ray.remote(...).options(**...)`):
            `num_cpus`, `num_gpus`, `memory`, `resources`, `scheduling_strategy`,
            `runtime_env`... Default {"num_cpus": 1}. Options no node of the cluster can
            hold are an error before an actor starts.
        max_retries: how many times one batch is asked again after the actor making it
            died or its node left, each time of a new actor; then the batch's error.
        start_timeout: seconds the actors may take to start (to be placed and to
            unpickle the recipe) before an error says which are waiting and why.
    """

    def __init__(self, address: str | None = None, actors: int | None = None,
                 actor_options: Mapping[str, Any] | None = None, max_retries: int = 3,
                 start_timeout: float = 120.0) -> None:
        if address is not None and not isinstance(address, str):
            _checks.fail("address", "a string (as ray.init takes it) or None", address,
                         TypeError)
        self.address = address
        self.actors = None if actors is None else _checks.positive_int("actors", actors)
        if actor_options is None:
            actor_options = DEFAULT_ACTOR_OPTIONS
        if not isinstance(actor_options, Mapping) or not all(
                isinstance(key, str) for key in actor_options):
            _checks.fail("actor_options", "a dict of Ray's actor options (num_cpus=...)",
                         actor_options, TypeError)
        if {"max_concurrency", "concurrency_groups"} & set(actor_options):
            raise ValueError(
                "kerasgen's Ray actors make one batch at a time (a batch's order is set "
                "per task): `actor_options` must not set max_concurrency or "
                f"concurrency_groups; ask for more actors instead. Received: "
                f"actor_options={dict(actor_options)!r}.")
        self.actor_options = dict(actor_options)
        self.max_retries = _checks.non_negative_int("max_retries", max_retries)
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) or (
                not start_timeout > 0):
            _checks.fail("start_timeout", "a positive number of seconds", start_timeout)
        self.start_timeout = float(start_timeout)

    def __repr__(self) -> str:
        return (f"RayEngine(address={self.address!r}, actors={self.actors!r}, "
                f"actor_options={self.actor_options!r}, max_retries={self.max_retries}, "
                f"start_timeout={self.start_timeout})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RayEngine) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def actor_handles(self) -> list[Any]:
        """The Ray actors making batches for this engine now (Ray's ActorHandles; empty
        when no generator is using them): to watch them, or kill one to see its batches
        made again."""
        return list(RUNNING.get(self, ()))

    def connect(self) -> Any:
        """Ray, connected to the cluster (see `address`)."""
        ray = ray_module()
        if not ray.is_initialized():
            ray.init(address=self.address, logging_level="ERROR")
        return ray

    def actor_count(self, workers: int) -> int:
        """How many actors to start (see `actors`), once connected."""
        if self.actors is not None:
            return self.actors
        if workers > 1:
            return workers
        ray = ray_module()
        per_actor = float(self.actor_options.get("num_cpus", 1) or 0)
        cpus = float(ray.cluster_resources().get("CPU", 1))
        return max(1, int(cpus // per_actor) if per_actor > 0 else int(cpus))

    def check_fits(self, free_only: bool = False) -> None:
        """A ValueError, before any actor starts, where no node of the cluster has the
        resources `actor_options` asks of each actor (it would wait forever);
        `free_only`: where no node has them free now."""
        ray = ray_module()
        wanted = {"CPU": self.actor_options.get("num_cpus", 1) or 0,
                  "GPU": self.actor_options.get("num_gpus", 0) or 0,
                  "memory": self.actor_options.get("memory", 0) or 0,
                  **dict(self.actor_options.get("resources") or {})}
        wanted = {name: float(amount) for name, amount in wanted.items() if amount}
        if free_only:
            nodes = [free for free in _free_per_node(ray)]
        else:
            nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
        if any(all(node.get(name, 0) >= amount for name, amount in wanted.items())
               for node in nodes):
            return
        largest = {name: max((node.get(name, 0) for node in nodes), default=0)
                   for name in wanted}
        raise ValueError(
            f"No node of the Ray cluster can hold one actor of RayEngine(actor_options="
            f"{self.actor_options!r}): each asks {wanted}, and the most any of its "
            f"{len(nodes)} live node(s) has is {largest}. Ask less per actor, or add a "
            "node that has it.")


def _free_per_node(ray: Any) -> list[dict[str, float]]:
    """The resources free now on each live node (Ray's state API is optional: without
    it, the cluster's free total stands for one node)."""
    try:
        from ray._private.state import available_resources_per_node

        return list(available_resources_per_node().values())
    except Exception:  # noqa: BLE001 - an older or newer Ray: the total, as one node
        return [dict(ray.available_resources())]
