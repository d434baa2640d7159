"""Hugging Face interop: the Hub (:mod:`clawgym.core.hub`, at the ground floor for every stage that reads from it:
download a dataset file or snapshot, upload a folder, each failure one line) and datasets (:mod:`clawgym.hf.dataset`:
tasks, trajectories and SFT data as a dataset folder that `datasets.load_dataset` reads). `huggingface_hub` and `datasets` are imported only by the functions that use them."""
