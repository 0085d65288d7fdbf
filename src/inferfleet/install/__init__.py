"""Effects that install runtimes: the pinned llama.cpp build (download sdist, untar, cmake)."""
