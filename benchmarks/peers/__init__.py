"""The peers' own application modules: their tasks, declared the way their docs say."""
