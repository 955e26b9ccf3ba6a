"""RFC 9162 Merkle tree and range proofs: published vectors, a naive transcription, properties."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn.codec import (
    InclusionProof,
    MerkleTree,
    RangeProof,
    empty_root,
    leaf_hash,
    merge_range_proofs,
    node_hash,
    range_proof,
    verify_inclusion,
    verify_range,
)
from xdn.codec._ranges import range_nodes

# RFC 6962 / RFC 9162 share the hashing; these are the Certificate Transparency reference
# test vectors (leaf entries, Merkle Tree Hash of the first n entries, inclusion proofs).
CT_ENTRIES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f")
]  # fmt: skip
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [  # (zero-based leaf index, tree size, path)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip


# -- a literal transcription of RFC 9162 §2.1.1 and §2.1.3.1 (recursive, quadratic) ----------


def _largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def naive_mth(entries: list[bytes]) -> bytes:
    if not entries:
        return hashlib.sha256(b"").digest()
    if len(entries) == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = _largest_power_of_two_below(len(entries))
    return hashlib.sha256(b"\x01" + naive_mth(entries[:k]) + naive_mth(entries[k:])).digest()


def naive_path(m: int, entries: list[bytes]) -> list[bytes]:
    n = len(entries)
    if n == 1:
        return []
    k = _largest_power_of_two_below(n)
    if m < k:
        return [*naive_path(m, entries[:k]), naive_mth(entries[k:])]
    return [*naive_path(m - k, entries[k:]), naive_mth(entries[:k])]


# -- known answers ---------------------------------------------------------------------------


def test_hash_primitives_follow_rfc() -> None:
    assert empty_root() == hashlib.sha256(b"").digest()
    assert leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert (
        node_hash(b"a" * 32, b"b" * 32) == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    )


@pytest.mark.parametrize("size", range(len(CT_ROOTS)))
def test_roots_match_ct_vectors(size: int) -> None:
    assert MerkleTree.from_entries(CT_ENTRIES[:size]).root.hex() == CT_ROOTS[size]


@pytest.mark.parametrize(("index", "size", "path"), CT_INCLUSION)
def test_inclusion_proofs_match_ct_vectors(index: int, size: int, path: list[str]) -> None:
    tree = MerkleTree.from_entries(CT_ENTRIES[:size])
    proof = tree.inclusion_proof(index)
    assert [h.hex() for h in proof.path] == path
    assert (proof.leaf_index, proof.tree_size) == (index, size)
    root = bytes.fromhex(CT_ROOTS[size])
    assert verify_inclusion(leaf_hash(CT_ENTRIES[index]), proof, root=root, tree_size=size)
    assert not verify_inclusion(
        leaf_hash(CT_ENTRIES[index]), proof, root=bytes.fromhex(CT_ROOTS[0]), tree_size=size
    )


@pytest.mark.parametrize("size", range(1, 70))
def test_tree_matches_naive_rfc_definition(size: int) -> None:
    entries = [f"entry-{i}".encode() for i in range(size)]
    tree = MerkleTree.from_entries(entries)
    assert tree.size == size
    assert tree.root == naive_mth(entries)
    for index in range(size):
        proof = tree.inclusion_proof(index)
        assert list(proof.path) == naive_path(index, entries)
        assert verify_inclusion(leaf_hash(entries[index]), proof, root=tree.root, tree_size=size)


def test_inclusion_proof_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        InclusionProof(leaf_index=3, tree_size=3, path=())
    with pytest.raises(ValueError):
        InclusionProof(leaf_index=0, tree_size=2, path=(b"short",))
    with pytest.raises(TypeError):
        InclusionProof(leaf_index=0, tree_size=2, path=[b"x" * 32])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        InclusionProof(leaf_index=True, tree_size=2, path=())
    with pytest.raises(IndexError):
        MerkleTree.from_entries([b"a"]).inclusion_proof(1)


def test_proof_for_other_tree_size_is_refused() -> None:
    # Leaf 0's proof in a 5-leaf tree also "verifies" for a claimed size of 6 or 8 (same shape
    # along the path); the trusted size must come from the signed manifest.
    entries = [bytes([i]) for i in range(5)]
    tree = MerkleTree.from_entries(entries)
    proof = tree.inclusion_proof(0)
    lying = InclusionProof(leaf_index=0, tree_size=6, path=proof.path)
    assert not verify_inclusion(leaf_hash(entries[0]), lying, root=tree.root, tree_size=5)
    assert not verify_inclusion(leaf_hash(entries[0]), proof, root=tree.root, tree_size=6)


# -- properties ------------------------------------------------------------------------------

entries_st = st.lists(st.binary(max_size=12), min_size=1, max_size=40, unique=True)


@settings(max_examples=150, deadline=None)
@given(entries=entries_st, data=st.data())
def test_every_proof_verifies_and_any_alteration_fails(
    entries: list[bytes], data: st.DataObject
) -> None:
    tree = MerkleTree.from_entries(entries)
    size = len(entries)

    def verifies(leaf: bytes, proof: InclusionProof) -> bool:
        return verify_inclusion(leaf, proof, root=tree.root, tree_size=size)

    index = data.draw(st.integers(0, size - 1), label="index")
    proof = tree.inclusion_proof(index)
    leaf = leaf_hash(entries[index])
    assert verifies(leaf, proof)

    if size > 1:
        other = data.draw(st.integers(0, size - 1).filter(lambda i: i != index), label="other")
        assert not verifies(leaf, InclusionProof(leaf_index=other, tree_size=size, path=proof.path))
        assert not verifies(leaf_hash(entries[other]), proof)
    assert not verifies(leaf_hash(entries[index] + b"!"), proof)

    longer = InclusionProof(leaf_index=index, tree_size=size, path=(*proof.path, b"\x00" * 32))
    assert not verifies(leaf, longer)
    if proof.path:
        at = data.draw(st.integers(0, len(proof.path) - 1), label="at")
        bit = data.draw(st.integers(0, 255), label="bit")
        flipped = bytearray(proof.path[at])
        flipped[bit // 8] ^= 1 << (bit % 8)
        path = (*proof.path[:at], bytes(flipped), *proof.path[at + 1 :])
        assert not verifies(leaf, InclusionProof(leaf_index=index, tree_size=size, path=path))
        shorter = InclusionProof(leaf_index=index, tree_size=size, path=proof.path[:-1])
        assert not verifies(leaf, shorter)


# -- range proofs ----------------------------------------------------------------------------


def naive_range_path(start: int, end: int, entries: list[bytes], offset: int = 0) -> list[bytes]:
    """The RFC decomposition walked recursively: hashes of subtrees outside [start, end)."""
    lo, hi = offset, offset + len(entries)
    if hi <= start or end <= lo:
        return [naive_mth(entries)]
    if start <= lo and hi <= end:
        return []
    k = _largest_power_of_two_below(len(entries))
    return naive_range_path(start, end, entries[:k], lo) + naive_range_path(
        start, end, entries[k:], lo + k
    )


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 17])
def test_range_proofs_match_the_naive_walk_and_verify(size: int) -> None:
    entries = [f"entry-{i}".encode() for i in range(size)]
    tree = MerkleTree.from_entries(entries)
    leaves = [leaf_hash(e) for e in entries]
    for start in range(size):
        for end in range(start + 1, size + 1):
            proof = range_proof(tree, start, end)
            assert list(proof.path) == naive_range_path(start, end, entries)
            assert len(proof.path) <= 2 * max(1, (size - 1).bit_length())
            assert verify_range(leaves[start:end], proof, root=tree.root, tree_size=size)


@pytest.mark.parametrize(("index", "size", "path"), CT_INCLUSION)
def test_single_leaf_range_proof_holds_the_ct_inclusion_hashes(
    index: int, size: int, path: list[str]
) -> None:
    tree = MerkleTree.from_entries(CT_ENTRIES[:size])
    proof = range_proof(tree, index, index + 1)
    assert sorted(h.hex() for h in proof.path) == sorted(path)
    root = bytes.fromhex(CT_ROOTS[size])
    assert verify_range([leaf_hash(CT_ENTRIES[index])], proof, root=root, tree_size=size)


def test_whole_tree_range_needs_no_hashes() -> None:
    entries = [bytes([i]) for i in range(6)]
    tree = MerkleTree.from_entries(entries)
    proof = range_proof(tree, 0, 6)
    assert proof.path == ()
    assert verify_range([leaf_hash(e) for e in entries], proof, root=tree.root, tree_size=6)


def test_range_proof_rejects_bad_shapes() -> None:
    for start, end, size in ((0, 0, 1), (2, 1, 3), (0, 4, 3)):
        with pytest.raises(ValueError):
            RangeProof(start=start, end=end, tree_size=size, path=())
    with pytest.raises(ValueError):
        RangeProof(start=0, end=1, tree_size=2, path=(b"short",))
    with pytest.raises(TypeError):
        RangeProof(start=0, end=1, tree_size=2, path=[bytes(32)])  # type: ignore[arg-type]
    tree = MerkleTree.from_entries([bytes([i]) for i in range(5)])
    with pytest.raises(ValueError):
        range_proof(tree, 3, 6)
    for start, end in ((1, 3), (0, 3), (4, 6)):  # not subtrees of a 5-leaf tree
        with pytest.raises(ValueError):
            tree.subtree_hash(start, end)


def test_range_proof_for_other_tree_size_or_run_is_refused() -> None:
    entries = [bytes([i]) for i in range(7)]
    leaves = [leaf_hash(e) for e in entries]
    tree = MerkleTree.from_entries(entries)
    proof = range_proof(tree, 2, 4)
    # As for inclusion proofs, [2, 4) has the same shape in trees of 7 and 8 leaves: the
    # trusted size (from the signed manifest) must match the proof's.
    assert not verify_range(leaves[2:4], proof, root=tree.root, tree_size=8)
    lying = RangeProof(start=2, end=4, tree_size=8, path=proof.path)
    assert not verify_range(leaves[2:4], lying, root=tree.root, tree_size=7)
    moved = RangeProof(start=3, end=5, tree_size=7, path=proof.path)
    assert not verify_range(leaves[2:4], moved, root=tree.root, tree_size=7)
    assert not verify_range(leaves[2:5], proof, root=tree.root, tree_size=7)
    assert not verify_range([leaves[3], leaves[2]], proof, root=tree.root, tree_size=7)


@settings(max_examples=150, deadline=None)
@given(entries=entries_st, data=st.data())
def test_range_proofs_verify_merge_and_refuse_alterations(
    entries: list[bytes], data: st.DataObject
) -> None:
    tree = MerkleTree.from_entries(entries)
    size = len(entries)
    leaves = [leaf_hash(e) for e in entries]
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, size - 1)), max_size=4), label="cuts"))
    cuts = [c for c in cuts if c < size]
    bounds = [0, *cuts, size]
    proofs = [range_proof(tree, a, b) for a, b in itertools.pairwise(bounds)]
    for proof in proofs:
        assert verify_range(leaves[proof.start : proof.end], proof, root=tree.root, tree_size=size)
    first = data.draw(st.integers(0, len(proofs) - 1), label="first")
    last = data.draw(st.integers(first, len(proofs) - 1), label="last")
    merged = merge_range_proofs(proofs[first : last + 1])
    assert merged == range_proof(tree, proofs[first].start, proofs[last].end)

    proof = proofs[first]
    run = leaves[proof.start : proof.end]
    at = data.draw(st.integers(0, len(run) - 1), label="leaf")
    altered = [*run[:at], leaf_hash(entries[proof.start + at] + b"!"), *run[at + 1 :]]
    assert not verify_range(altered, proof, root=tree.root, tree_size=size)
    if proof.path:
        index = data.draw(st.integers(0, len(proof.path) - 1), label="hash")
        flipped = bytearray(proof.path[index])
        flipped[0] ^= 1
        path = (*proof.path[:index], bytes(flipped), *proof.path[index + 1 :])
        bad = dataclasses.replace(proof, path=path)
        assert not verify_range(run, bad, root=tree.root, tree_size=size)
        assert not verify_range(
            run, dataclasses.replace(proof, path=proof.path[:-1]), root=tree.root, tree_size=size
        )
    longer = dataclasses.replace(proof, path=(*proof.path, bytes(32)))
    assert not verify_range(run, longer, root=tree.root, tree_size=size)


def test_merge_refuses_runs_that_do_not_touch() -> None:
    tree = MerkleTree.from_entries([bytes([i]) for i in range(6)])
    with pytest.raises(ValueError):
        merge_range_proofs([range_proof(tree, 0, 2), range_proof(tree, 3, 4)])
    with pytest.raises(ValueError):
        merge_range_proofs([])
    broken = dataclasses.replace(range_proof(tree, 0, 2), path=())
    with pytest.raises(ValueError):
        merge_range_proofs([broken, range_proof(tree, 2, 4)])
    assert range_nodes(0, 6, 6) == []
