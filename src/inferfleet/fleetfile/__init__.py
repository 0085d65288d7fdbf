"""The fleet file: schema (pydantic), loader with file:line:col errors."""
