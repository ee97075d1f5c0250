"""Notes (MECHANISM: "The note ask and sealing"): the note tool (`tool`), the ask and the
episodes awaiting a note (`ask`), taking a note (`taking`), and the note writers that answer an
ask when the live model cannot (`writers`)."""
