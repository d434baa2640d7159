"""Persona-driven task synthesis: the scenario/operation taxonomy and the user personas it samples from.

The leaf wing of the layout: only the CLI imports this package. It writes checks in the form of
:mod:`clawgym.checks`, takes its taxonomy from :mod:`clawgym.core.taxonomy`, and hands its validation workers
to an executor (:meth:`clawgym.rollout.executor.Executor.worker_pool`) by importable name."""

from clawgym.core.taxonomy import (
    Category,
    Operation,
    OperationCategory,
    Subcategory,
    SynthDataError,
    Taxonomy,
    TaxonomyError,
    load_taxonomy,
)
from clawgym.synth.personas import (
    Persona,
    PersonaError,
    default_personas_path,
    load_personas,
    persona_summary,
)

__all__ = [
    "Category",
    "Operation",
    "OperationCategory",
    "Persona",
    "PersonaError",
    "Subcategory",
    "SynthDataError",
    "Taxonomy",
    "TaxonomyError",
    "default_personas_path",
    "load_personas",
    "load_taxonomy",
    "persona_summary",
]
