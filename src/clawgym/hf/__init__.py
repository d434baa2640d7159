"""Hugging Face interop: the Hub (:mod:`clawgym.hf.hub`: download a dataset file, upload a folder, each failure
one line) and datasets (:mod:`clawgym.hf.dataset`: tasks, trajectories and SFT data as a dataset folder that
`datasets.load_dataset` reads). `huggingface_hub` and `datasets` are imported only by the functions that use them."""
