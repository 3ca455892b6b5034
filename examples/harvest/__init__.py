"""The README's example game: sow grain, and the harvest raises the field's production."""
