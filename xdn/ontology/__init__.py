"""The shared ontology: OWL files → concept-containment DAG, maximum conceptual blocks, checks.

Administrators edit the ontology in Protégé and save it as RDF/XML, OWL/XML or N-Triples;
several files may import one another. :func:`load_ontology` screens each file with the hardened
parser, loads them with owlready2 into a private ``World`` and reduces them to an
:class:`Ontology` of plain strings over a frozen ``networkx`` DAG (edges parent → child).
Concept containment is ``rdfs:subClassOf``; multiple inheritance is allowed. :func:`check`
reports what makes an ontology unfit for dissemination, with file and line; the ``_render``
functions draw it.
"""

from xdn.ontology._check import Problem, ProblemKind, check
from xdn.ontology._load import load_ontology
from xdn.ontology._model import Location, Ontology, local_name
from xdn.ontology._render import dot_text, svg_text, tree_lines

__all__ = [
    "Location",
    "Ontology",
    "Problem",
    "ProblemKind",
    "check",
    "dot_text",
    "load_ontology",
    "local_name",
    "svg_text",
    "tree_lines",
]
