"""Model providers behind one small streaming interface (`ChatModel`)."""
