"""Deterministic, streaming generator of realistic enterprise XML for both sample schemas.

Theory of operation
-------------------
:func:`generate` writes a document valid against ``ontology/schemas/<schema>.xsd`` with
``lxml.etree.xmlfile``: elements are opened and closed on the output stream as they are
produced, so memory stays constant from 1 KB to 1 GB. The document is a fixed prologue (header,
process plan or laboratory equipment), then repeated *units* (a work order or an inspection job)
until the byte target is reached, then a short epilogue. The first unit is *complete* (every
optional part present) so that any document larger than a few KB contains every concept its
mapping knows; units written when little budget is left are *small*.

Sizes: bytes are counted as they leave the serializer (flushed after every unit), so the output
overshoots ``target_bytes`` by at most one unit (a few KB), plus the closing tags.

``fragments_hint`` steers fragment size rather than document size: free-text elements
(instructions, remarks, comments, descriptions) are padded so that the document reaches its size
with about that many mapped elements; the remaining byte budget is spread over the mapped
elements still wanted. The hint is met to within about one unit (10-30 mapped elements; the
prologue and the first, complete unit are never smaller). Text is written in pieces of at most
:data:`MAX_TEXT_PIECE` bytes, one element each, so that no text node exceeds the hardened
parser's limits.

Everything random comes from ``random.Random(seed)``: the same seed gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from lxml import etree

__all__ = ["MAX_TEXT_PIECE", "SCHEMAS", "generate"]

SCHEMAS = ("production-dept", "qa-company")
MAX_TEXT_PIECE = 64 * 1024
_TAIL_BYTES = 80
_SMALL_BELOW = 4096
_BASE_DAY = dt.date(2024, 1, 1)

_VOCABULARY = (
    "spindle fixture datum bore flange tolerance coolant feed batch lot inspect verify clamp "
    "tool offset probe surface finish chamfer thread torque deburr wash gauge calibrate release "
    "operator shift setup drawing revision sample deviation rework scrap approve measure record "
    "nominal upper lower limit cycle pallet program check visual"
)
_WORDS = tuple(_VOCABULARY.split())
_CUSTOMERS = (
    "Nordwind Antriebe GmbH",
    "Hansa Pumpen AG",
    "Elbe Marine Systems",
    "Rheinmetall Components",
    "Alster Hydraulik KG",
    "Baltic Wind Parts",
)
_PRODUCTS = (
    ("GH-420", "Gear housing GH-420"),
    ("PC-88", "Pump cover PC-88"),
    ("SH-12", "Drive shaft SH-12"),
    ("BR-7", "Bearing bracket BR-7"),
    ("VB-310", "Valve body VB-310"),
)
_OPERATIONS = (
    "face milling",
    "fine boring",
    "turning",
    "drilling",
    "thread cutting",
    "grinding",
    "deburring",
    "washing",
    "assembly",
)
_PARAMETERS = (
    ("spindleSpeed", "rpm", 800, 12000),
    ("feedRate", "mm/min", 100, 2400),
    ("coolantPressure", "bar", 10, 70),
    ("depthOfCut", "mm", 0.1, 3.0),
)
_FEATURES = (
    "main bore diameter",
    "flange flatness",
    "thread pitch",
    "overall length",
    "shaft runout",
    "surface roughness Ra",
)
_MODELS = (
    ("DMG Mori", "DMU 65 monoBLOCK"),
    ("Hermle", "C 42 U"),
    ("Mazak", "QTN 250"),
    ("Carl Zeiss", "CONTURA 10/12/6"),
    ("Mahr", "Millimess 844 N"),
)
_GRADES = ("EN-GJL-250", "42CrMo4", "S355J2", "AlSi10Mg", "1.4404")
_PEOPLE = ("J. Petersen", "Dr. M. Albers", "K. Nowak", "A. Yilmaz", "S. Hansen", "L. Brandt")


class _Out(Protocol):
    def write(self, data: bytes, /) -> int | None: ...


class _CountingWriter:
    """File-like adapter that counts the bytes lxml hands to the real output."""

    def __init__(self, out: _Out) -> None:
        self._out = out
        self.count = 0

    def write(self, data: bytes) -> int:
        self._out.write(data)
        self.count += len(data)
        return len(data)


@dataclass(slots=True)
class _Writer:
    """Small helpers over an ``xmlfile`` context; tracks mapped elements and padding."""

    xf: Any
    ns: str
    rng: random.Random
    paragraphs: tuple[str, ...]
    mapped: int = 0
    padded: int = 0
    pad_per_node: int = 0
    debt: int = 0
    budget: int = 0
    depth: int = 1
    nested: bool = False

    @contextmanager
    def node(
        self, name: str, attrs: dict[str, str] | None = None, *, mapped: bool = False
    ) -> Iterator[None]:
        """Open an element on its own indented line; close it on one if it had children."""
        if mapped:
            self.mapped += 1
            self.debt += self.pad_per_node
        self.xf.write("\n" + "  " * self.depth)
        self.depth += 1
        self.nested = False
        with self.xf.element(f"{{{self.ns}}}{name}", attrs or {}):
            yield
            self.depth -= 1
            if self.nested:
                self.xf.write("\n" + "  " * self.depth)
        self.nested = True

    def leaf(
        self, name: str, text: object, attrs: dict[str, str] | None = None, *, mapped: bool = False
    ) -> None:
        with self.node(name, attrs, mapped=mapped):
            self.xf.write(str(text))

    def prose(self, low: int = 6, high: int = 16) -> str:
        words = [self.rng.choice(_WORDS) for _ in range(self.rng.randint(low, high))]
        return " ".join(words).capitalize() + "."

    def pad(self, name: str) -> None:
        """Pay the padding owed by the mapped elements opened so far, as ``name`` elements.

        Every mapped element opened adds ``pad_per_node`` bytes of debt; the next free-text
        slot pays it, within what is left of the unit's ``budget``.
        """
        size = min(self.debt, self.budget)
        self.debt = 0
        self.budget -= size
        while size > 0:
            piece = min(size, MAX_TEXT_PIECE)
            with self.node(name):
                left = piece
                while left > 0:
                    para = self.rng.choice(self.paragraphs)[:left]
                    self.xf.write(para)
                    left -= len(para)
            self.padded += piece
            size -= piece + 2 * len(name) + 8

    def day(self, spread: int = 365) -> str:
        return (_BASE_DAY + dt.timedelta(days=self.rng.randrange(spread))).isoformat()

    def code(self, prefix: str, width: int = 5) -> str:
        return f"{prefix}-{self.rng.randrange(10**width):0{width}d}"

    def decimal(self, low: float, high: float, places: int = 3) -> str:
        return f"{self.rng.uniform(low, high):.{places}f}"


class _Schema(Protocol):
    ns: str
    prefix: str
    root: str

    def root_attrs(self, w: _Writer) -> dict[str, str]: ...
    def prologue(self, w: _Writer) -> None: ...
    def unit(self, w: _Writer, index: int, *, full: bool, small: bool) -> None: ...
    def epilogue(self, w: _Writer, units: int) -> None: ...


class _ProductionDept:
    ns = "urn:example:production-dept"
    prefix = "pd"
    root = "WorkOrders"

    def root_attrs(self, w: _Writer) -> dict[str, str]:
        return {
            "plant": f"HH-{w.rng.randrange(1, 10):02d}",
            "generated": f"{w.day()}T06:00:00Z",
            "schemaVersion": "2.3",
        }

    def prologue(self, w: _Writer) -> None:
        with w.node("Header"):
            w.leaf("Issuer", "Production Planning")
            w.leaf("Batch", w.code("B-2024"))
            w.leaf("ExportedBy", "MES export service 4.2")
        with w.node("ProcessPlan", {"id": w.code("PP"), "revision": "3"}, mapped=True):
            w.leaf("Title", "Machining and final inspection of cast housings")
            w.leaf("Owner", "Manufacturing engineering")
            w.leaf("Description", w.prose())

    def unit(self, w: _Writer, index: int, *, full: bool, small: bool) -> None:
        r = w.rng
        steps = 1 if small else r.randint(1, 4)
        results = 0 if small else (2 if full else r.randint(0, 3))
        machines = 0 if small else (1 if full else r.randint(0, 2))
        sku, product = r.choice(_PRODUCTS)
        attrs = {
            "id": f"WO-{index + 1:07d}",
            "priority": r.choice(("low", "normal", "high")),
            "status": r.choice(("planned", "released", "in-progress")),
        }
        with w.node("Order", attrs, mapped=True):
            w.leaf("Customer", r.choice(_CUSTOMERS), {"ref": w.code("C", 4)})
            w.leaf("DueDate", w.day())
            with w.node("Manufacturing", {"line": f"L{r.randint(1, 4)}"}, mapped=True):
                w.leaf("Product", product, {"sku": f"SKU-{sku}"})
                w.leaf("Quantity", r.randrange(10, 2000, 10), {"unit": "pcs"})
                if full or (not small and r.random() < 0.7):
                    self._spec(w, sku)
                for seq in range(steps):
                    self._step(w, seq, settings=0 if small else r.randint(0, 3))
            if results or full:
                with w.node("QA", {"plan": f"QP-{sku}"}, mapped=True):
                    w.leaf("Inspector", r.choice(_PEOPLE))
                    for n in range(results):
                        self._result(w, n)
            if machines or full:
                with w.node("Resources", mapped=True):
                    for _ in range(machines):
                        self._machine(w)
                    for _ in range(1 if full else r.randint(0, 2)):
                        with w.node("Material", {"lot": w.code("L")}, mapped=True):
                            w.leaf("Grade", r.choice(_GRADES))
                            w.leaf("Quantity", r.randrange(50, 5000), {"unit": "kg"})
                            w.leaf("Supplier", "Giesserei Lindner KG")

    def _spec(self, w: _Writer, sku: str) -> None:
        with w.node("Spec", {"revision": w.rng.choice("ABCD")}, mapped=True):
            w.leaf("Drawing", f"DRW-{sku}")
            for feature in w.rng.sample(_FEATURES, 2):
                w.leaf("Tolerance", w.decimal(0.005, 0.05), {"feature": feature, "unit": "mm"})
            with w.node("ResourceSpec", mapped=True):
                w.leaf("MaterialGrade", w.rng.choice(_GRADES))
                w.leaf("MachineClass", "5-axis machining centre")

    def _step(self, w: _Writer, seq: int, *, settings: int) -> None:
        attrs = {"seq": str(10 * (seq + 1)), "operation": w.rng.choice(_OPERATIONS)}
        with w.node("Step", attrs, mapped=True):
            w.leaf("Instruction", w.prose())
            w.pad("Instruction")
            for _ in range(settings):
                name, unit, low, high = w.rng.choice(_PARAMETERS)
                w.leaf(
                    "Setting",
                    w.decimal(low, high, 1),
                    {"machine": w.code("M", 3), "parameter": name, "unit": unit},
                    mapped=True,
                )
            w.leaf("Duration", f"PT{w.rng.randint(2, 90)}M")

    def _result(self, w: _Writer, n: int) -> None:
        verdict = w.rng.choice(("pass", "pass", "pass", "fail", "rework"))
        with w.node("Result", {"sample": f"S-{n + 1:03d}", "verdict": verdict}, mapped=True):
            for feature in w.rng.sample(_FEATURES, w.rng.randint(1, 4)):
                w.leaf(
                    "Measure",
                    w.decimal(41.98, 42.02),
                    {"characteristic": feature, "unit": "mm", "nominal": "42.000"},
                    mapped=True,
                )
            w.pad("Remark")

    def _machine(self, w: _Writer) -> None:
        maker, model = w.rng.choice(_MODELS)
        with w.node("Machine", {"id": w.code("M", 3)}, mapped=True):
            w.leaf("Model", f"{maker} {model}")
            w.leaf("Location", f"Hall {w.rng.randint(1, 6)}")
            w.pad("Description")

    def epilogue(self, w: _Writer, units: int) -> None:
        with w.node("Summary", {"orders": str(units)}):
            pass


class _QaCompany:
    ns = "urn:example:qa-company"
    prefix = "qa"
    root = "InspectionReport"

    def __init__(self) -> None:
        self.instruments: list[str] = []

    def root_attrs(self, w: _Writer) -> dict[str, str]:
        return {"reportId": w.code("QAR-2024", 4), "issued": w.day(), "language": "en"}

    def prologue(self, w: _Writer) -> None:
        self.instruments = [w.code("INS", 3) for _ in range(3)]
        with w.node("Lab", {"site": "Bremen"}):
            w.leaf("Name", "Weser Prueflabor GmbH")
            w.leaf("Accreditation", "DAkkS D-PL-20417-01-00")
        with w.node("Scope", {"client": "Hamburg plant"}, mapped=True):
            w.leaf("Process", "Series production of machined housings")
            w.leaf("Standard", "ISO 2768-mK")
        with w.node("Equipment", mapped=True):
            for tag in self.instruments:
                maker, model = w.rng.choice(_MODELS)
                with w.node("Instrument", {"assetTag": tag, "kind": "gauge"}, mapped=True):
                    w.leaf("Maker", maker)
                    w.leaf("Model", model)
                    w.leaf("CalibratedOn", w.day())
            with w.node(
                "Sample",
                {"sampleId": w.code("SMP"), "material": w.rng.choice(_GRADES)},
                mapped=True,
            ):
                w.leaf("Origin", f"Lot {w.code('L')}")
                w.leaf("Mass", w.decimal(100, 5000, 1), {"unit": "g"})
            with w.node("Requirements", {"standard": "ISO 10360-2"}, mapped=True):
                w.leaf("Requirement", "Parts acclimatised to 20 degC for at least 4 h.")

    def unit(self, w: _Writer, index: int, *, full: bool, small: bool) -> None:
        r = w.rng
        inspections = 1 if small or full else r.randint(1, 3)
        findings = [1 if small else r.randint(1, 3) for _ in range(inspections)]
        attrs = {
            "jobNo": f"J-{index + 1:07d}",
            "customerOrder": f"WO-{r.randrange(10**6):06d}",
            "opened": w.day(),
        }
        with w.node("Job", attrs, mapped=True):
            w.leaf("Client", r.choice(_CUSTOMERS))
            if full or (not small and r.random() < 0.5):
                sku, _ = r.choice(_PRODUCTS)
                with w.node(
                    "PartSpec", {"drawing": f"DRW-{sku}", "revision": r.choice("ABC")}, mapped=True
                ):
                    for feature in r.sample(_FEATURES, 2):
                        w.leaf(
                            "Feature",
                            "",
                            {
                                "name": feature,
                                "nominal": "42.000",
                                "tolerance": w.decimal(0.005, 0.05),
                                "unit": "mm",
                            },
                        )
            for n, count in enumerate(findings):
                attrs = {
                    "id": f"INSP-{index + 1:06d}-{n + 1}",
                    "method": "tactile CMM scan",
                    "date": w.day(),
                }
                with w.node("Inspection", attrs, mapped=True):
                    w.leaf("Inspector", r.choice(_PEOPLE))
                    for seq in range(count):
                        self._finding(w, seq)

    def _finding(self, w: _Writer, seq: int) -> None:
        status = w.rng.choice(("conform", "conform", "nonconform", "observation"))
        with w.node("Finding", {"seq": str(seq + 1), "status": status}, mapped=True):
            for feature in w.rng.sample(_FEATURES, w.rng.randint(1, 3)):
                w.leaf(
                    "Reading",
                    w.decimal(41.98, 42.02),
                    {
                        "feature": feature,
                        "unit": "mm",
                        "instrument": w.rng.choice(self.instruments),
                    },
                    mapped=True,
                )
            w.leaf("Comment", w.prose())
            w.pad("Comment")

    def epilogue(self, w: _Writer, units: int) -> None:
        with w.node("Signature", {"date": w.day()}):
            w.leaf("SignedBy", w.rng.choice(_PEOPLE))
            w.leaf("Role", f"Head of laboratory ({units} jobs)")


def _schema(name: str) -> _Schema:
    if name == "production-dept":
        return _ProductionDept()
    if name == "qa-company":
        return _QaCompany()
    raise ValueError(f"unknown schema {name!r}; choose one of {', '.join(SCHEMAS)}")


def generate(
    schema: str,
    target_bytes: int,
    out: BinaryIO,
    *,
    seed: int,
    fragments_hint: int | None = None,
) -> int:
    """Write one document of about ``target_bytes`` bytes to ``out``; return bytes written.

    Args:
        schema: ``"production-dept"`` or ``"qa-company"``.
        target_bytes: size to reach (the result overshoots by at most one unit).
        out: binary stream; written incrementally, never seeked, not closed.
        seed: the same seed (and arguments) gives byte-identical output.
        fragments_hint: approximate number of mapped elements wanted; padding makes the
            fragments bigger so that the document reaches its size with about that many.

    Raises:
        ValueError: unknown schema, non-positive size or hint.
    """
    spec = _schema(schema)
    if target_bytes < 1:
        raise ValueError("target_bytes must be positive")
    if fragments_hint is not None and fragments_hint < 1:
        raise ValueError("fragments_hint must be positive")
    rng = random.Random(seed)
    paragraphs = tuple(" ".join(rng.choice(_WORDS) for _ in range(160)) + ". " for _ in range(32))
    counter = _CountingWriter(out)
    with etree.xmlfile(counter, encoding="utf-8") as xf:
        xf.write_declaration()
        w = _Writer(xf=xf, ns=spec.ns, rng=rng, paragraphs=paragraphs)
        with xf.element(
            f"{{{spec.ns}}}{spec.root}", spec.root_attrs(w), nsmap={spec.prefix: spec.ns}
        ):
            spec.prologue(w)
            units = 0
            while True:
                remaining = target_bytes - counter.count - _TAIL_BYTES
                if fragments_hint:
                    _plan_padding(w, counter.count, remaining, fragments_hint)
                spec.unit(
                    w,
                    units,
                    full=units == 0 and remaining > _SMALL_BELOW,
                    small=remaining < _SMALL_BELOW,
                )
                units += 1
                xf.flush()
                if counter.count + _TAIL_BYTES >= target_bytes:
                    break
            spec.epilogue(w, units)
            xf.write("\n")
    return counter.count


def _plan_padding(w: _Writer, written: int, remaining: int, hint: int) -> None:
    """Set padding per mapped element so that the document ends with about ``hint`` of them.

    The remaining budget is spread over the mapped elements still wanted; the natural
    (unpadded) size of a mapped element is estimated from what has been written so far.
    """
    natural = (written - w.padded) / w.mapped if w.mapped else 200.0
    per_fragment = remaining / max(1, hint - w.mapped)
    w.pad_per_node = max(0, int(per_fragment - natural))
    w.budget = max(0, remaining - 1024)
