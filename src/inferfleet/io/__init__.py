"""The only choke points for side effects: processes and HTTP."""
