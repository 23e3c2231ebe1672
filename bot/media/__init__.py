"""Media people send: content-addressed storage on disk, image downscaling, voice-note
transcription, and turning an adapter's `Attachment`s into the `MediaRef`s a person's turn
keeps. Platform-free: adapters hand over bytes and metadata."""
