// The built-in calibration text of tern-convert --calibrate (written for this project;
// no third-party text): short passages of different kinds (a children's story, dialogue,
// a letter, a speech, exposition, instructions, a list with numbers) so attention sees
// local, positional and long-range patterns. Passages are separated by blank lines.
#pragma once

namespace tern::convert {

inline constexpr const char kBuiltinCalibrationText[] =
    "Once upon a time there was a little girl named Mia who loved to look at the sky. Every evening she sat on "
    "the steps with her old dog, Pepper, and counted the stars. One night a star fell down behind the hill. Mia "
    "put on her red boots and ran to find it. Pepper ran after her, barking. Behind the hill they found a small "
    "shiny stone, warm like bread from the oven. Mia held it up and smiled. \"I will keep you safe,\" she said. "
    "When she got home, her mother asked where she had been. Mia showed her the stone, and her mother laughed and "
    "gave her a hug. From that day on, Mia and Pepper counted one star less, but they did not mind.\n"
    "\n"
    "\"Are you quite sure you will not stay for dinner?\" asked Mrs. Harper, folding her hands.\n"
    "\"Quite sure, thank you,\" said the young man. \"My sister expects me before dark, and the road is poor.\"\n"
    "\"Then you must take the lantern. I will not hear of you walking without a light.\"\n"
    "He bowed, took the lantern, and promised to return it on Sunday. When the door had closed behind him, Mrs. "
    "Harper turned to her daughter and observed that a man who kept his promises was rarer than one supposed.\n"
    "\n"
    "Dear Thomas,\n"
    "I write in haste, for the post leaves within the hour. The weather has turned at last, and the fields by the "
    "river are green again. Your aunt is much recovered and sends her love. We hope to see you before the end of "
    "the month, if your duties allow it. Pray tell me whether the books arrived safely.\n"
    "Your affectionate brother, William\n"
    "\n"
    "Fellow citizens, the state of our nation is strong, but it is not yet what it must become. We have built "
    "roads and schools, opened new markets for our farmers, and kept the peace with our neighbors. Yet too many "
    "families still struggle to pay for a home, and too many children still learn in crowded rooms. I ask the "
    "Congress to act this year: to invest in our people, to balance the budget over time, and to keep faith with "
    "those who have served our country.\n"
    "\n"
    "Water boils at 100 degrees Celsius at sea level, but at lower temperatures on a high mountain, because the "
    "air pressure is lower there. The boiling point of a liquid is the temperature at which its vapor pressure "
    "equals the pressure around it. For the same reason a pressure cooker, which raises the pressure inside the "
    "pot, cooks food faster: the water inside stays liquid above 100 degrees.\n"
    "\n"
    "To plant a tree, first dig a hole twice as wide as the roots and just as deep. Loosen the soil at the sides. "
    "Set the tree in the middle, spread the roots, and fill the hole halfway with soil. Water it well, let the "
    "water drain, then fill the rest of the hole. Press the soil down gently and water again. In the first year, "
    "water the tree once a week when it does not rain.\n"
    "\n"
    "Shopping list for the week: 2 loaves of bread, 12 eggs, 1 kilogram of apples, 3 onions, a bag of rice, milk, "
    "cheese, and 4 cans of tomatoes. Total spent last week: 38 dollars and 50 cents. Meeting on Monday at 9:30, "
    "dentist on Thursday at 14:00, and the train to the city leaves at 7:15 on Saturday morning.\n"
    "\n"
    "The little boat rocked on the waves. Sam held the rope tight and looked at his grandfather. \"Will the fish "
    "come today?\" he asked. Grandfather nodded slowly. \"The fish come when they want to, not when we want them "
    "to. That is why we wait.\" So they waited. The sun climbed high, and the water sparkled. At last the rope "
    "pulled hard, and Sam shouted with joy. It was the biggest fish he had ever seen, and they let it go back "
    "into the sea, because it was too beautiful to keep.\n";

}  // namespace tern::convert
