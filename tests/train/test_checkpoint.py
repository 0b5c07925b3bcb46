"""Checkpoints: the newest three kept; a damaged one is skipped, with one warning."""

import asyncio
import gc

import jax.numpy as jnp
import numpy as np
import pytest
import tensorstore as ts

from jaxgrid.errors import UserError
from jaxgrid.train.checkpoint import Checkpoints, CheckpointWarning

# enough arrays that a failed restore abandons reads of others, as a learner state does
ARRAYS = 30


def _tree(update: int) -> list:
    """Incompressible arrays (orbax compresses, and keeps arrays under 1 kB inline)."""
    rng = np.random.default_rng(update)
    return [jnp.asarray(rng.standard_normal(1000, np.float32)) for _ in range(ARRAYS)]


def _saved(directory, updates) -> Checkpoints:
    checkpoints = Checkpoints(directory)
    for update in updates:
        checkpoints.save(update, _tree(update))
    return checkpoints


def _truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _truncate_data(step_dir) -> None:
    """Truncate the largest file of a checkpoint: its array data."""
    _truncate(max((f for f in step_dir.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size))


def _truncate_metadata(step_dir) -> None:
    _truncate(step_dir / "default" / "_METADATA")


def test_the_newest_three_are_kept(tmp_path):
    checkpoints = _saved(tmp_path, [2, 4, 6, 8])
    assert checkpoints.updates() == [4, 6, 8]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["4", "6", "8"]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("damage", [_truncate_data, _truncate_metadata])
def test_a_damaged_newest_checkpoint_is_skipped_with_one_warning(tmp_path, damage):
    checkpoints = _saved(tmp_path, [2, 4, 6])
    damage(tmp_path / "6")
    with pytest.warns(CheckpointWarning) as caught:
        update, restored = checkpoints.restore_newest(_tree(0))
    assert update == 4
    np.testing.assert_array_equal(restored[7], _tree(4)[7])
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("skipped damaged checkpoint(s) 6 (") and "\n" not in message
    assert message.endswith("; using checkpoint 4")

    # a resumed run rewrites the checkpoints after the one it resumed from
    checkpoints.drop_after(update)
    checkpoints.save(6, _tree(60))
    assert checkpoints.restore_newest(_tree(0))[0] == 6


def _abandon_a_read_on_a_closed_loop():
    """What orbax leaves when a restore fails: a task awaiting a tensorstore read whose
    event loop was closed (``run_until_complete`` then ``close``, no cancelling); returns
    the promise that completes the read."""
    promise, read = ts.Promise.new()

    async def restore():
        asyncio.ensure_future(_await(read))
        await asyncio.sleep(0)
        raise ValueError("one array did not read")

    loop = asyncio.new_event_loop()
    with pytest.raises(ValueError):
        loop.run_until_complete(restore())
    loop.close()
    return promise


async def _await(read):
    await read


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_reads_abandoned_by_a_skipped_checkpoint_stay_quiet_when_they_end_late(tmp_path, caplog):
    # the CI machine finished orbax's abandoned reads after restore_newest had returned:
    # each woke the closed loop, "Exception ignored in: None ... Event loop is closed"
    checkpoints = _saved(tmp_path, [2, 4])
    _truncate_data(tmp_path / "4")
    with pytest.warns(CheckpointWarning):
        assert checkpoints.restore_newest(_tree(0))[0] == 2
    _abandon_a_read_on_a_closed_loop().set_result(None)
    gc.collect()
    assert not [r for r in caplog.records if "Task was destroyed" in r.getMessage()]


def test_no_intact_checkpoint_is_one_line_naming_each(tmp_path):
    checkpoints = _saved(tmp_path, [2, 4])
    _truncate_data(tmp_path / "4")
    _truncate_metadata(tmp_path / "2")
    with pytest.raises(UserError, match=r"^no intact checkpoint in .*: 4 \(.*\); 2 \(JSON") as e:
        checkpoints.restore_newest(_tree(0))
    assert "\n" not in str(e.value)


def test_no_checkpoint_at_all(tmp_path):
    with pytest.raises(UserError, match="no checkpoint in"):
        Checkpoints(tmp_path).restore_newest(_tree(0))
