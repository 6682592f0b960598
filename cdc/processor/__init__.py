"""The event processor: user functions over state tables, exactly-once with the changelog."""

from cdc.processor.events import InputEvent, RejectEvent, json_decoder
from cdc.processor.processor import EventProcessor, Handler, ProcessorConfig, RunReport
from cdc.processor.restore import RestoreReport

__all__ = [
    "EventProcessor",
    "Handler",
    "InputEvent",
    "ProcessorConfig",
    "RejectEvent",
    "RestoreReport",
    "RunReport",
    "json_decoder",
]
