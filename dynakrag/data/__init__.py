"""Datasets with gold annotations, their splits, the DS-RAG corpus, and the generated demo world."""
